"""A stand-in for torchvision (it does not load here): what the vendored scripts call, no
more (see ORIGIN). The same in every folder: a test process imports it once."""
