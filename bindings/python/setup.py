# The wheel carries libsolo (a shared library built by cargo, not a Python extension): marking
# the distribution as binary gives it the platform's tag instead of "any".
from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=BinaryDistribution)
