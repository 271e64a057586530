"""Turning configuration into schedulers: profiles, objectives, the service's choice.

Why a layer of its own: compiling a profile instantiates policies by name (the
registry in ``streams.policies``), and the core defines the interfaces those
policies implement, so the core cannot do it without importing its plug-ins.
This package sits above both: ``streams.core`` <- ``streams.policies`` <-
``streams.profiles``, one way.
"""
