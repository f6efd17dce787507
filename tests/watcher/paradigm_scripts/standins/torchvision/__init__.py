"""A stand-in for torchvision (it does not load here): what the vendored scripts call, no
more (see ORIGIN); one for every vendored folder (tests/watcher/test_watch_paradigms.py puts
it on the path)."""
