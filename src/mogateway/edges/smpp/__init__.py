"""The running SMPP binds: connections, what a bind does with each deliver_sm, the SMPP reply channel."""
