cwlVersion: v1.2
class: CommandLineTool
doc: How inputs become a command line (prefix, position, separate, arrays, booleans, optional, enum, valueFrom).
baseCommand: echo
arguments:
  - {valueFrom: "--", position: -1}
  - {valueFrom: "$(inputs.name).out", prefix: "-o=", separate: false, position: 5}
inputs:
  name:
    type: string
    inputBinding: {position: 1}
  count:
    type: int
    default: 2
    inputBinding: {prefix: -n, position: 2}
  ratio:
    type: float?
    inputBinding: {prefix: --ratio, position: 2}
  verbose:
    type: boolean
    inputBinding: {prefix: -v}
  quiet:
    type: boolean?
    inputBinding: {prefix: -q}
  tags:
    type: string[]
    inputBinding: {prefix: --tags, position: 3}
  keys:
    type: {type: array, items: string, inputBinding: {prefix: -k}}
    inputBinding: {position: 4}
  csv:
    type: int[]
    inputBinding: {itemSeparator: ",", prefix: "--csv=", separate: false, position: 4}
  mode:
    type: {type: enum, symbols: [fast, slow]}
    inputBinding: {prefix: --mode}
  note:
    type: string?
    inputBinding: {position: 6}
  data:
    type: File
    inputBinding: {position: 7, valueFrom: $(self.basename)}
stdout: line.txt
outputs:
  line: stdout
