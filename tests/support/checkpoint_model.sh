#!/usr/bin/env bash
# tests/support/checkpoint_model.sh INDEX: the lines of a checkpoint's index that describe the
# model: every tensor's name, dtype and shape, and each piece's place and checksum. Left out:
# the save's tag and the file names that carry it, the whole file's checksum, and the
# optimizer state (a torch archive whose bytes vary from run to run). Two runs that end with
# the same parameters print the same lines.
exec grep -v -e '^tag ' -e '^file ' -e '^checksum ' -e '^piece optimizer' "$1"
