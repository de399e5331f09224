cwlVersion: v1.2
class: Workflow
doc: A step with several sources - two sorted files and an echoed line, flattened into one list for cat.
requirements:
  MultipleInputFeatureRequirement: {}
  StepInputExpressionRequirement: {}
inputs:
  first: File
  second: File
  title: string
outputs:
  merged:
    type: File
    outputSource: join/all
  heading:
    type: File
    outputSource: head/out
steps:
  sort_first:
    run: sort.cwl
    in: {text: first}
    out: [sorted]
  sort_second:
    run: sort.cwl
    in: {text: second, reverse: {default: true}}
    out: [sorted]
  head:
    run: echo.cwl
    in:
      message: {source: title, valueFrom: "title-$(self)"}
    out: [out]
  join:
    run: cat.cwl
    in:
      files:
        source: [head/out, sort_first/sorted, sort_second/sorted]
        linkMerge: merge_flattened
    out: [all]
