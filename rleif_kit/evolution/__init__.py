"""The Evol-Instruct engine used by stage 01 and by the IRM fan-out of stage 04: operators, evolvers, elimination."""
