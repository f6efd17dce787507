"""save_image: the tests keep no pictures."""


def save_image(tensor, fp, **kwargs):
    return None
