// TODO(parse helper): source_map, to_string(), workflow::find_action.
