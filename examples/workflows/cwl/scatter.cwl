cwlVersion: v1.2
class: Workflow
doc: Echo each message (a scatter), label each file with its message (a dotproduct scatter), then gather the labels into one file.
requirements:
  ScatterFeatureRequirement: {}
inputs:
  messages: string[]
  files: File[]
outputs:
  echoed:
    type: File[]
    outputSource: echo/out
  labelled:
    type: File[]
    outputSource: label/out
  all:
    type: File
    outputSource: gather/all
steps:
  echo:
    run: echo.cwl
    scatter: message
    in: {message: messages}
    out: [out]
  label:
    run: label.cwl
    scatter: [label, text]
    scatterMethod: dotproduct
    in: {label: messages, text: files}
    out: [out]
  gather:
    run: cat.cwl
    in: {files: label/out}
    out: [all]
