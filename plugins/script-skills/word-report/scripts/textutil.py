"""Helpers the scripts may import (not a script itself)."""


def words(text):
    return text.split()
