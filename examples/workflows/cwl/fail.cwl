cwlVersion: v1.2
class: CommandLineTool
doc: A tool that fails, saying why on stderr.
baseCommand: sh
arguments: [-c, 'echo "cannot frobnicate $0" >&2; exit 1', $(inputs.what)]
inputs:
  what: string
outputs: []
