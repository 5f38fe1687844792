"""Off-machine durability: ship the WAL and snapshots to S3-compatible object storage."""
