"""A stock FedAvg ServerApp for torchlet SuperNodes (tests/fleet, README "A fleet")."""
