"""A stand-in for `tyro.cli` (not installed here): the fields of CleanRL's Args
dataclass as --kebab-case flags, bools as --flag / --no-flag. Written for these tests,
not part of CleanRL."""

import argparse
import dataclasses


def cli(cls):
    parser = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction)
        else:
            kind = {"int": int, "float": float}.get(str(f.type), None) or (
                f.type if f.type in (int, float) else str
            )
            parser.add_argument(flag, dest=f.name, type=kind)
    given = {k: v for k, v in vars(parser.parse_args()).items() if v is not None}
    return cls(**given)
