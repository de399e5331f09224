class: CommandLineTool
cwlVersion: v1.2
inputs: []
outputs: []
requirements:
  ToolTimeLimit:
    timelimit: 0
  WorkReuse:
    enableReuse: false
baseCommand: [sleep, "15"]
