// TODO(parse helper): load_workflow, load_inputs_file.
