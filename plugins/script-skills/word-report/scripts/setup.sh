#!/bin/bash
set -e
pip install nothing
