"""The method families by name: where each one's audit lives, and its title. A module of its own
(nothing imported) so that the command line can start worker processes for the families before it
imports them (:mod:`fairaudit.__main__`)."""

FAMILIES: dict[str, str] = {
    "pca": "fairaudit.pca.audit:PCAAudit",
    "nmf": "fairaudit.nmf.audit:NMFAudit",
    "fs": "fairaudit.fs.audit:FSAudit",
    "cpd": "fairaudit.cpd.audit:CPDAudit",
}
"""Method family name → ``"module:Class"``, a :class:`fairaudit.audit.FamilyAudit` subclass."""

FAMILY_TITLES = {"pca": "PCA", "nmf": "NMF", "fs": "Feature selection", "cpd": "Tensor (CP)"}
