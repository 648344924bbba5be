"""The team layer: persistent mailbox, typed protocol and plan gate, teammates and their runtime."""
