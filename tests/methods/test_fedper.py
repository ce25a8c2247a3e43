"""FedPer (Arivazhagan et al.): the head never leaves the client."""
import pytest
from support import BN_CNN, check_personal_layers_stay

from fedrepro.models import head_keys


@pytest.mark.parametrize("name, keys_of", [("fedper", head_keys)])
def test_personal_layers_never_leave_the_client(tiny, name, keys_of):
    check_personal_layers_stay(tiny(**BN_CNN, **{"method.name": name}), keys_of)
