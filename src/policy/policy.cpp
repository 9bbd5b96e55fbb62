// TODO(plan helper)
