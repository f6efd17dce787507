from lion_pytorch.lion_pytorch import Lion
