cwlVersion: v1.2
class: CommandLineTool
doc: Sort the lines of a file.
baseCommand: sort
inputs:
  reverse:
    type: boolean
    default: false
    inputBinding: {prefix: -r, position: 1}
  text:
    type: File
    inputBinding: {position: 2}
stdout: sorted.txt
outputs:
  sorted: stdout
