"""How the worker processes of one gateway reach each other (``mogateway serve --workers N``)."""
