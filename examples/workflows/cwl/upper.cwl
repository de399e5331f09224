cwlVersion: v1.2
class: CommandLineTool
doc: A text in capitals (tr reads it on stdin).
baseCommand: [tr, a-z, A-Z]
inputs:
  text: File
stdin: $(inputs.text.path)
stdout: $(inputs.text.nameroot).upper$(inputs.text.nameext)
outputs:
  out: stdout
