#!/bin/sh
# Prints far more than the line cap allows.
head -c 3000000 /dev/zero | tr '\0' 'x'
