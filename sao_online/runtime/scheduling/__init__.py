"""What runs when: the synchronous and asynchronous runtimes, the planner (the run's clock and
the episodes that start next), the staleness gate, the learner's batch selection and the rules
for stragglers. Nothing is imported here."""
