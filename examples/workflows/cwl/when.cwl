cwlVersion: v1.2
class: Workflow
doc: Conditional steps - sorted only when asked, counted only when there are more than two files.
requirements:
  InlineJavascriptRequirement: {}
  ScatterFeatureRequirement: {}
  MultipleInputFeatureRequirement: {}
inputs:
  text: File
  do_sort: boolean
  files: File[]
outputs:
  sorted:
    type: File?
    outputSource: sort/sorted
  capitals:
    type: File?
    outputSource: upper/out
  counts:
    type: string[]
    outputSource: count/count
    pickValue: all_non_null
steps:
  sort:
    run: sort.cwl
    when: $(inputs.do_sort)
    in: {text: text, do_sort: do_sort}
    out: [sorted]
  upper:
    run: upper.cwl
    when: $(!inputs.do_sort)
    in: {text: text, do_sort: do_sort}
    out: [out]
  count:
    run: wc.cwl
    scatter: text
    when: $(inputs.text.size > 20)
    in: {text: files}
    out: [count]
