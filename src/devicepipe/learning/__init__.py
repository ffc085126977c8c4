"""Learning what normal looks like, layered inside: ``learn`` (one run's settings, and training
a model or an ensemble of them and scoring its rows) over ``ensemble`` (vmap ensembles) and
``score`` (embeddings, scores, thresholds) over ``train`` (the epoch loop, checkpoints,
DistributedDataParallel ranks)."""
