cwlVersion: v1.2
class: CommandLineTool
doc: Needs JavaScript, which mpiws does not run.
requirements:
  - class: InlineJavascriptRequirement
baseCommand: echo
inputs:
  n: int
arguments: [$(inputs.n + 1)]
outputs: []
