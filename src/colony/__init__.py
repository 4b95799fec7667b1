"""colony-operator: GPU colonies on Cluster API and distributed training on them."""
