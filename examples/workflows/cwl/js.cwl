cwlVersion: v1.2
class: CommandLineTool
doc: Needs JavaScript, which the endpoint's CWL runner (cwltool) evaluates, not its own engine.
requirements:
  - class: InlineJavascriptRequirement
baseCommand: echo
inputs:
  n: int
arguments: [$(inputs.n + 1)]
outputs: []
