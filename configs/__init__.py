"""Ready experiment configs shipped with the package (YAML files)."""
