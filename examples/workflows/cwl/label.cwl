cwlVersion: v1.2
class: CommandLineTool
doc: A label and a file's line count, on one line.
baseCommand: sh
arguments:
  - -c
  - 'printf "%s: " "$0"; wc -l < "$1"'
inputs:
  label:
    type: string
    inputBinding: {position: 1}
  text:
    type: File
    inputBinding: {position: 2}
stdout: $(inputs.label).txt
outputs:
  out: stdout
