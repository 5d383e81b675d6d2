"""AWS Lambda only: one event loop per execution environment, EMF metrics, deadlines."""
