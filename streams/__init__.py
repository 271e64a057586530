"""The scheduler side: pure decision core, policies, Faust processors, simulator."""
