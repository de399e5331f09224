cwlVersion: v1.2
class: CommandLineTool
doc: Concatenate files.
baseCommand: cat
inputs:
  files:
    type: File[]
    inputBinding: {position: 1}
stdout: all.txt
outputs:
  all: stdout
