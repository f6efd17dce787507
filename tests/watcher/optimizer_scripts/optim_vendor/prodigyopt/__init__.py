from .prodigy import Prodigy
