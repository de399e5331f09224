cwlVersion: v1.2
class: CommandLineTool
doc: Print a message (to a file).
baseCommand: echo
inputs:
  message:
    type: string
    inputBinding: {position: 1}
stdout: $(inputs.message).txt
outputs:
  out: stdout
