cwlVersion: v1.2
class: CommandLineTool
doc: Split a file into parts of N lines (a glob of several files), and bundle it into a directory.
baseCommand: sh
arguments:
  - -c
  - 'split -l "$1" "$2" part- && mkdir -p bundle/copies && cp "$2" bundle/ && cp "$2" bundle/copies/again.txt'
  - sh
inputs:
  lines:
    type: int
    inputBinding: {position: 1}
  text:
    type: File
    inputBinding: {position: 2}
outputs:
  parts:
    type: File[]
    outputBinding: {glob: "part-*"}
  bundle:
    type: Directory
    outputBinding: {glob: bundle}
  first:
    type: File
    outputBinding: {glob: "bundle/$(inputs.text.basename)"}
