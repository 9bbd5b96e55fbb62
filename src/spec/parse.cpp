// TODO(parse helper): YAML -> workflow.
