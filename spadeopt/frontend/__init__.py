"""The front end: the Python DSL apps are written in (``dsl``) and the validation that
turns its declarations into a frozen ``model.AppGraph`` (``validate``), asking each
operator's kind (``spadeopt.kinds``) what it accepts and produces."""
