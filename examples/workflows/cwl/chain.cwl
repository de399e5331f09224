cwlVersion: v1.2
class: Workflow
doc: Three steps passing files by reference - capitals, sorted, counted.
inputs:
  text: File
  reverse:
    type: boolean
    default: true
outputs:
  sorted:
    type: File
    outputSource: sort/sorted
  count:
    type: string
    outputSource: lines/count
  count_file:
    type: File
    outputSource: lines/count_file
steps:
  upper:
    run: upper.cwl
    in: {text: text}
    out: [out]
  sort:
    run: sort.cwl
    in:
      text: upper/out
      reverse: reverse
    out: [sorted]
  lines:
    run: wc.cwl
    in: {text: sort/sorted}
    out: [count, count_file]
