"""The pipeline program: the model every layer above shares (planner, connectors, engine,
controller, worker). It imports nothing of ours."""
