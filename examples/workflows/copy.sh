#!/bin/sh
# A legacy program for the program chains: copy.sh IN OUT copies a file (as `cat` would).
#   mpiws serve --program 'copy=examples/workflows/copy.sh [in:file:src:binary] [out:file:dst:binary]'
cat "$1" > "$2"
