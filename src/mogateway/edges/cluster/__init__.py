"""Several nodes: who is alive (the node directory) and replies for another node's bind."""
