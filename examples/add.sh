#!/bin/sh
# A legacy program: add.sh X YFILE RESULTFILE writes X plus the number in
# YFILE to RESULTFILE. Made a service with no change by its template:
#   mpiws serve --program 'add=examples/add.sh [in:val:x:int] [in:file:y:int] [out:file:result:int]'
echo "adding $1 and $(cat "$2")"
expr "$1" + "$(cat "$2")" > "$3"
