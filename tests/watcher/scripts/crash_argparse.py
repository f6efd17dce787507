# fails before its first step: a required argument is missing (argparse: SystemExit(2))
import argparse

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--data", required=True)
args = ap.parse_args()
torch.zeros(1)
