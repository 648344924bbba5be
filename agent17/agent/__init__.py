"""The agent layer: models (scripted and real), the runner loop, permissions, audit and ledger."""
