"""DMT towers: learned feature partitioning (partition) and tower-wise sharding (sharding)."""
