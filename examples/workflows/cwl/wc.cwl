cwlVersion: v1.2
class: CommandLineTool
doc: Count the lines of a file; the count as a file and as a string.
baseCommand: [wc, -l]
inputs:
  text: File
stdin: $(inputs.text.path)
stdout: count.txt
outputs:
  count_file: stdout
  count:
    type: string
    outputBinding:
      glob: count.txt
      loadContents: true
      outputEval: $(self[0].contents)
